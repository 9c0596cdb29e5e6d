"""``python -m surgelab``: the same CLI as the ``surgelab`` script."""

from surgelab.cli import main

if __name__ == "__main__":
    main()
