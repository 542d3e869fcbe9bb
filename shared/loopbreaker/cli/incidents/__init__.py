"""``loopbreaker incidents list|show|report``: what the responder knows, from its store.

``commands`` registers the subcommands and prints one incident or a list; ``report`` sums a
window of incidents (time to verdict, outcomes, repeat-offender hosts); ``cost`` its
accelerator-hours.
"""
