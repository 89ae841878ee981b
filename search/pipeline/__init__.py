"""The ``pipeline`` search problem: hybrid-parallel training configurations of a UNet/UViT on a cluster."""
