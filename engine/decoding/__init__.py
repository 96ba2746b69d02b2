"""Reading a prompt and writing an answer: the generation loop, sampling, penalties, the text stream and the events it sends."""
