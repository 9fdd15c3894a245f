"""The training engine: flat parameter vectors, client data on the device, and local SGD for a round's clients."""
