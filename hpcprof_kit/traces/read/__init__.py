"""The lowest floor: one trace file (Kineto or unitrace, ``.json`` or ``.json.gz``) read into one rank's
columns, with the arguments the rules read and the ``[memory]`` events kept in the same pass,
the compiled scanner, and each file's cache copy. Imports nothing of the floors above.
"""
