"""The DPHE paper's scenario: one-vs-rest linear classifiers, their updates, and what the updates leak."""
