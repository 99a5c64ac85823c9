"""Rule-agnostic LibCST edits shared by the rules' fixes: node in, node out."""
