/**
 * Coalesce bursts of model changes into one render per frame.
 *
 * The kernel already batches updates (at most one sync every ~50 ms), but a sync can
 * change several traits at once, each firing its own change event: the view asks for
 * a render on each and draws once.
 */

/** Runs a callback later (requestAnimationFrame in the browser). */
export type Defer = (callback: () => void) => void;

/** Default deferral: the next animation frame, or a macrotask where there is none. */
export const nextFrame: Defer = callback => {
  if (typeof requestAnimationFrame === 'function') {
    requestAnimationFrame(() => callback());
  } else {
    setTimeout(callback, 0);
  }
};

/** Calls `render` once for any number of `request()`s made before it runs. */
export class RenderScheduler {
  private pending = false;
  private renders = 0;

  constructor(
    private readonly render: () => void,
    private readonly defer: Defer = nextFrame
  ) {}

  /** Ask for a render; returns false when one was already pending. */
  request(): boolean {
    if (this.pending) {
      return false;
    }
    this.pending = true;
    this.defer(() => this.flush());
    return true;
  }

  /** Render now if a render is pending. */
  flush(): void {
    if (!this.pending) {
      return;
    }
    this.pending = false;
    this.renders += 1;
    this.render();
  }

  /** How many renders ran. */
  get count(): number {
    return this.renders;
  }
}
