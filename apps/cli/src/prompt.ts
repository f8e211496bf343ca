import { createInterface } from 'node:readline/promises';

/** Asks one question on the terminal and returns the answer (trimmed). */
export async function ask(input: NodeJS.ReadStream, output: NodeJS.WriteStream, question: string, signal?: AbortSignal): Promise<string> {
  const rl = createInterface({ input, output, terminal: true });
  try {
    return (await rl.question(question, { signal })).trim();
  } finally {
    rl.close();
  }
}
