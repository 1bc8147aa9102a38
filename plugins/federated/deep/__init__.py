"""Deep networks in the federated scenario: models, local work, gradient inversion."""
