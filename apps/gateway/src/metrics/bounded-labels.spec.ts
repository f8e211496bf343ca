import { BoundedLabels } from './bounded-labels';

describe('BoundedLabels', () => {
  it('gives the first N distinct values their own label and counts the rest as other', () => {
    const labels = new BoundedLabels(2);
    expect(labels.label('ten_a')).toBe('ten_a');
    expect(labels.label('ten_b')).toBe('ten_b');
    expect(labels.label('ten_c')).toBe('other');
    expect(labels.label('ten_d')).toBe('other');
    expect(labels.size).toBe(2);
  });

  it('keeps a value on the label it got first, however many others come', () => {
    const labels = new BoundedLabels(1);
    expect(labels.label('ten_a')).toBe('ten_a');
    for (let i = 0; i < 1000; i++) labels.label(`ten_${i}`);
    expect(labels.label('ten_a')).toBe('ten_a');
    expect(labels.label('ten_1')).toBe('other');
  });

  it('never holds more than its limit however many values pass through', () => {
    const labels = new BoundedLabels(50);
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) seen.add(labels.label(`ten_${i % 5000}`));
    expect(seen.size).toBe(51); // 50 tenants and other
    expect(labels.size).toBe(50);
  });

  it('with a limit of 0 labels everything other', () => {
    const labels = new BoundedLabels(0);
    expect(labels.label('ten_a')).toBe('other');
    expect(labels.size).toBe(0);
  });
});
