"""Usage metering for billing: one record per finished job, exported as CloudEvents."""
