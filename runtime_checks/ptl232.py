"""PTL232 legacy-loss-reduction: `reduction=` gives every loss exactly as the legacy
pair did (main() computes one of each kind; results compared as they are)."""
