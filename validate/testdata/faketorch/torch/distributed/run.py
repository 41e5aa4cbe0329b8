"""Fake torch.distributed.run: present so that probe.py finds the module;
the fake python3 hands "-m torch.distributed.run" to testdata/fake/torchrun."""

raise SystemExit("fake torch: run testdata/fake/torchrun instead")
