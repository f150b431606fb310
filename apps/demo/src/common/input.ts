import { BadRequestException } from '@nestjs/common';

/** The body as an object, or a 400. */
export function objectBody(body: unknown): Record<string, unknown> {
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestException('The body must be a JSON object (send content-type: application/json)');
  }
  return body as Record<string, unknown>;
}

/**
 * The `email` field as a string, or a 400. Whether it is a valid address is left to reliable-mail, whose
 * MailValidationError the exception filter turns into a 400 with the library's message.
 */
export function emailField(body: Record<string, unknown>): string {
  const { email } = body;
  if (typeof email !== 'string' || email.trim().length === 0) {
    throw new BadRequestException('email is required and must be a string');
  }
  return email.trim();
}
