"""What is sent: request kinds, token lengths, prompt synthesis and the built-in tokenizer."""
