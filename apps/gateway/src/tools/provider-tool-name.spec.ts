import { MAX_PROVIDER_TOOL_NAME, providerToolName } from './provider-tool-name';

describe('providerToolName', () => {
  it('joins the parts with __ and keeps a name providers accept as it is', () => {
    expect(providerToolName('mcp', 'github', 'search_issues')).toBe('mcp__github__search_issues');
  });

  it('shortens a long name deterministically, within 64 characters of [a-zA-Z0-9_-]', () => {
    const long = providerToolName('mcp', 'a-very-long-server-name', 'and_an_even_longer_tool_name_that_goes_on_and_on');
    expect(long.length).toBe(MAX_PROVIDER_TOOL_NAME);
    expect(long).toMatch(/^mcp__a-very-long-server-name__and_an_even_longer_[a-z0-9_]+$/);
    expect(providerToolName('mcp', 'a-very-long-server-name', 'and_an_even_longer_tool_name_that_goes_on_and_on')).toBe(long);
  });

  it('never gives two different tools one name', () => {
    const a = providerToolName('mcp', 's', 'x'.repeat(80) + 'a');
    const b = providerToolName('mcp', 's', 'x'.repeat(80) + 'b');
    expect(a).not.toBe(b);
    // Replacing refused characters could collide with a real name: the hash tells them apart.
    expect(providerToolName('mcp', 's', 'get.item')).not.toBe(providerToolName('mcp', 's', 'get_item'));
    expect(providerToolName('mcp', 's', 'get.item')).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
  });
});
