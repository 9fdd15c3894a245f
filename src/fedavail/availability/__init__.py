"""Client availability: models of p_i^t and participation (models.py), and traces drawn from them (traces.py)."""
