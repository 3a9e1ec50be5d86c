import type { Redis } from 'ioredis';

/**
 * The lock a conversation's turn holds, atomic across API replicas: SET NX with a time to live
 * (spec 1: 10 minutes), valued with a fencing token from a counter that only grows. Release is a
 * compare-and-delete, so a turn whose lock expired and was taken over never frees its successor's;
 * and its reply write is checked against the token in PostgreSQL (repository.appendReply).
 */
export const LOCK_TTL_MS = 10 * 60 * 1000;

const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export class ConversationTurnLock {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** A fencing token when the lock was free, else null. */
  async acquire(conversationId: string): Promise<number | null> {
    const fence = await this.redis.incr(`${this.prefix}:conv-fence:${conversationId}`);
    const taken = await this.redis.set(this.key(conversationId), String(fence), 'PX', LOCK_TTL_MS, 'NX');
    return taken === 'OK' ? fence : null;
  }

  async release(conversationId: string, fence: number): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.key(conversationId), String(fence));
  }

  private key(conversationId: string): string {
    return `${this.prefix}:conv-lock:${conversationId}`;
  }
}
