"""Generated from proto/waymark/v1 by `make proto`. Do not edit."""
