"""When requests are sent: arrival processes and load schedules, computable without sending."""
