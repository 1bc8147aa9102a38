"""Album sharing: geolocation of photo collections and album pruning as the defense.

Paper: "Protecting Geolocation Privacy of Photo Collections" (Yang, Chakrabarti, Vorobeychik,
AAAI 2020). Modules: payloads, world (the SIMULATED default data), manifest + partition
(the CSV real-data path), classifier (Lightning), data (training pairs, collections),
pruning (greedy, top-1 exact, brute force), milp (naive and fast MILPs), protocol (a
defense's public settings and the one dispatch that runs them), adaptive (what an attacker
who knows the protocol learns from pruning albums of its own), dataset.
"""
