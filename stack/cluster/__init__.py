"""The cluster rehearsal: every pod the stack creates, add-ons included, placed together on the nodes it can have."""
