"""JobStatus values and hold reason codes, as HTCondor numbers them."""
IDLE, RUNNING, REMOVED, COMPLETED, HELD = 1, 2, 3, 4, 5
NAMES = {IDLE: "idle", RUNNING: "running", REMOVED: "removed", COMPLETED: "completed", HELD: "held"}

# HoldReasonCode values (HTCondor's "Job Hold Codes" table).
HOLD_BY_USER = 1
HOLD_TRANSFER_OUTPUT_FAILED = 12
HOLD_TRANSFER_INPUT_FAILED = 13
HOLD_PERIODIC_HOLD = 3
HOLD_JOB_POLICY_MEMORY = 34
HOLD_MEMORY_SUBCODE = 102
HOLD_EXECUTE_DURATION = 47
HOLD_STARTER_ERROR = 6
