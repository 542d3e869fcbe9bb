"""Chat: the platform-neutral notification, Block Kit and card rendering, the clients."""
