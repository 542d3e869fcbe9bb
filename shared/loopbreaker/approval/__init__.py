"""Human approval: signed action requests (pure), and who is calling (Slack, Google Chat)."""
