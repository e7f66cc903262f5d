// @ticketd/client: the TypeScript client of ticketd, a replicated lock
// service with fencing tokens. Use it with nodeTransport() from
// "@ticketd/client/node" or webTransport() from "@ticketd/client/web".
export { Client, createClient } from "./client.js";
export type {
  CallOpts, ClientOptions, Grant, HolderInfo, ListSessionsOpts, LockInfo, LockOptions, ReadOpts, SessionInfo, SessionLockInfo, TokenCheck,
} from "./client.js";
export type { Keeper } from "./keeper.js";
export { Lease } from "./lease.js";
export { Session } from "./session.js";
export { LockEventType } from "./watch.js";
export type { LockEvent, Watch, WatchOptions } from "./watch.js";
export type { TransportFactory } from "./transport.js";
export {
  AmbiguousError,
  ClosedError,
  FailedPreconditionError,
  InvalidArgumentError,
  LeaseLostError,
  LimitMismatchError,
  LockedError,
  NotHeldError,
  PermissionDeniedError,
  ReleasedError,
  ResourceExhaustedError,
  SessionNotFoundError,
  TicketdError,
  UnauthenticatedError,
  UnavailableError,
  WatchOutOfRangeError,
} from "./errors.js";
export * from "./gen/ticket/v1/lock_pb.js";
export * from "./gen/ticket/v1/cluster_pb.js";
