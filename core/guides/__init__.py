"""AI guides: who gets one, the prompt, reading the answer, and the step that writes them."""
