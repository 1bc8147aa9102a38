"""Deep-feature inputs: feature files, CelebA's attributes, face folders, the extractor, bundled features."""
