"""HE-friendly GCNs: partly-linearized graph convolutions trained by distillation, run under CKKS encryption."""
