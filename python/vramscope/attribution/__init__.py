# python/vramscope/attribution/__init__.py -- who holds the memory: ops, modules, categories, model
"""``profile()`` (per op and module), ``CategoryTracker`` (parameters, gradients, optimizer
state, activations, temporaries), the module hooks, and the model probe (batch size, block
lists, parameter and optimizer bytes). Imports only ``_core``."""
