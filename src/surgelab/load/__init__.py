"""When requests are sent: arrival processes and THE schedule (phases, request ids, send times), without sending."""
