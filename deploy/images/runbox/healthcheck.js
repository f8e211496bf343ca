// The image's HEALTHCHECK. What "healthy" means depends on the command the container runs
// (the init process's arguments say which): the gateway answers /healthz; the executor's
// /readyz on its own port answers (subscribed, NATS and its Docker engine up); a migration
// run has nothing to check.
'use strict';
const fs = require('node:fs');
const http = require('node:http');

const TIMEOUT_MS = 4000;
const command = fs.readFileSync('/proc/1/cmdline', 'utf8').split('\0');

function check(options) {
  const req = http.get({ ...options, timeout: TIMEOUT_MS }, (res) => {
    res.resume();
    process.exit(res.statusCode === 200 ? 0 : 1);
  });
  req.on('timeout', () => req.destroy(new Error('timed out')));
  req.on('error', () => process.exit(1));
}

if (command.includes('executor')) {
  check({ host: '127.0.0.1', port: Number(process.env.RUNBOX_EXECUTOR_HTTP_PORT || 8081), path: '/readyz' });
} else if (command.includes('migrate')) {
  process.exit(0);
} else {
  check({ host: '127.0.0.1', port: Number(process.env.PORT ?? 8080), path: '/healthz' });
}
