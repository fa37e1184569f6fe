"""The way back: job state from the user event log, holds, waits, retries and adoption."""
