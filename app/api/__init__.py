"""HTTP only: parse, call policy, serialise. No decisions are made here."""
