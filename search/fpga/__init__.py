"""The ``fpga-transformer`` problem: accelerator design and top-k sparse attention vs perplexity and makespan."""
