"""DPHE's protocol: Paillier encryption, the three parties, and the rounds of federated averaging."""
