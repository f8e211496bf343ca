export * from './tool-result';
export * from './tool-call/tool-call.contract';
export * from './tool-cancel/tool-cancel.contract';
export * from './session-release/session-release.contract';
export * from './executor-ping/executor-ping.contract';
export * from './run-queue/run-queue.contract';
export * from './run-events/run-events.contract';
export * from './run-cancel/run-cancel.contract';
