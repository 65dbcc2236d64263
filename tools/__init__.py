"""Developer tools: the local AWS emulator and the demo that deploys to it."""
