// @reliable-mail/nestjs/testing: an app's own tests of its mail, with the real outbox and no mail server.
export { withMailCapture } from './with-mail-capture.js';
export { MailTester, MailExpectationError, type EnqueuedMatch, type SentMatch } from './mail-tester.js';
export { CapturingTransport, type CapturedMail, type ScriptedAnswer } from './capturing.transport.js';
export type { DrainReport } from '../dispatch/due-drain.js';
