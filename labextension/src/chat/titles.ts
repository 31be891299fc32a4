/**
 * Chat titles and the chat list: a conversation's title (its own, else its first
 * message, as the server derives it), the newest-first order by last activity, a
 * local search that matches the server's `q`, and relative times. Pure.
 */

import type { Conversation } from './types';

export const UNTITLED = 'New chat';
export const TITLE_CHARS = 80;

/** A title from a first message: its first line, whitespace folded, at most 80 chars. */
export function titleFromText(text: string, max = TITLE_CHARS): string {
  const folded = text.replace(/\s+/g, ' ').trim();
  return folded.length > max ? folded.slice(0, max - 1).trimEnd() + '…' : folded;
}

/** What the list shows for a conversation. */
export function chatTitle(conv: Pick<Conversation, 'title' | 'metadata'>): string {
  const own = conv.metadata?.title;
  if (own && own.trim()) {
    return own.trim();
  }
  return conv.title && conv.title.trim() ? titleFromText(conv.title) : UNTITLED;
}

/** When it was last active (seconds). */
export function lastActive(conv: Pick<Conversation, 'created_at' | 'updated_at'>): number {
  return conv.updated_at ?? conv.created_at;
}

/** Newest first, by last activity (ties: the newer id first, as the server pages). */
export function sortChats<T extends Conversation>(chats: T[]): T[] {
  return [...chats].sort((a, b) => lastActive(b) - lastActive(a) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
}

/** The chats whose title holds `query` (case-insensitive); all for an empty query. */
export function filterChats<T extends Conversation>(chats: T[], query: string): T[] {
  const q = query.trim().toLowerCase();
  return q ? chats.filter(c => chatTitle(c).toLowerCase().includes(q)) : chats;
}

/** A conversation in the list, replaced (renamed, answered) or added, newest first. */
export function upsertChat<T extends Conversation>(chats: T[], conv: T): T[] {
  return sortChats([conv, ...chats.filter(c => c.id !== conv.id)]);
}

/** `now`, `5 min`, `3 h`, `2 d`, or the date, for the list's right column. */
export function relativeTime(seconds: number, now = Date.now() / 1000): string {
  const d = Math.max(0, now - seconds);
  if (d < 60) {
    return 'now';
  }
  if (d < 3600) {
    return `${Math.floor(d / 60)} min`;
  }
  if (d < 86400) {
    return `${Math.floor(d / 3600)} h`;
  }
  if (d < 86400 * 30) {
    return `${Math.floor(d / 86400)} d`;
  }
  return new Date(seconds * 1000).toISOString().slice(0, 10);
}
