"""Takedown cases (a reported output, every job made from the same face, removed and
blocked), subject erasure inside a tenant, and tenant offboarding (export, erase, a signed
receipt). docs/takedown.md is the operator's process."""
