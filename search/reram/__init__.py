"""The ``reram`` problem: protection settings of a model on faulty ReRAM crossbars vs accuracy and area."""
