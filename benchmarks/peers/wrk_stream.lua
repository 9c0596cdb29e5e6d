-- wrk: POST one streaming chat request (16 output tokens) per call; wrk reads the whole SSE body.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"ok","stream":true,"max_tokens":16,"messages":[{"role":"user","content":"' .. string.rep("word ", 64) .. '"}]}'
