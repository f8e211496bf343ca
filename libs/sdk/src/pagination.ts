import { RequestOptions } from './transport';

/** One page of a list answer; `next_cursor` is set when the server has more. */
export interface ListPage<T> {
  data: T[];
  next_cursor?: string | null;
  [name: string]: unknown;
}

/**
 * A list call: `await` it for the first page, or `for await` over it for every item of
 * every page (the next page is asked for only when the loop gets there).
 */
export class PagedList<T> implements PromiseLike<ListPage<T>>, AsyncIterable<T> {
  private first?: Promise<ListPage<T>>;

  constructor(private readonly fetchPage: (cursor: string | undefined, options: RequestOptions) => Promise<ListPage<T>>, private readonly options: RequestOptions) {}

  then<A = ListPage<T>, B = never>(onFulfilled?: ((page: ListPage<T>) => A | PromiseLike<A>) | null, onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
    return this.firstPage().then(onFulfilled, onRejected);
  }

  private firstPage(): Promise<ListPage<T>> {
    this.first ??= this.fetchPage(undefined, this.options);
    return this.first;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    let page = await this.firstPage();
    for (;;) {
      yield* page.data;
      const cursor = page.next_cursor;
      if (!cursor || page.data.length === 0) return;
      page = await this.fetchPage(cursor, this.options);
    }
  }

  /** Every item of every page, collected (bounded by `max`, default 10,000). */
  async all(max = 10_000): Promise<T[]> {
    const items: T[] = [];
    for await (const item of this) {
      items.push(item);
      if (items.length >= max) break;
    }
    return items;
  }
}
