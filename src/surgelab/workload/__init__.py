"""What is sent: request specs by index (prompts, kinds, sessions, trace rows), tokenizers and media."""
