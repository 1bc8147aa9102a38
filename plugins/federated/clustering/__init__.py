"""Federated mini-batch k-means, plaintext or under DPHE (DPHE (ICCV 2017) supplement A.3)."""
