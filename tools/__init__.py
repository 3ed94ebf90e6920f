"""The developer tools, all offline: the preview, the deploy rehearsal, the local run, cost, pictures, and the
stand-ins for the Pulumi CLI they run programs with (stack files read as the CLI reads them, the SDK's mocks)."""
