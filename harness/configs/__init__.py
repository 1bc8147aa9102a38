"""The packaged demo matrix and its report spec (``vispriv demo``)."""
