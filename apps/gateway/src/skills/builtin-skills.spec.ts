import { BUILTIN_SKILLS, describeSkill } from './builtin-skills';

describe('describeSkill', () => {
  it('takes a description: line when there is one', () => {
    expect(describeSkill('---\nname: x\ndescription: Use for releases.\n---\n# X\nOther.')).toBe('Use for releases.');
  });

  it('otherwise takes the first line that is not a heading', () => {
    expect(describeSkill('# Title\n\nUse when shipping.\n1. Step')).toBe('Use when shipping.');
  });

  it('cuts long descriptions', () => {
    expect(describeSkill('x'.repeat(300))).toHaveLength(200);
  });
});

describe('built-in skills', () => {
  it('have valid, unique names and a description each', () => {
    const names = BUILTIN_SKILLS.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    for (const skill of BUILTIN_SKILLS) {
      expect(skill.name).toMatch(/^[a-z0-9][a-z0-9_-]*$/);
      expect(describeSkill(skill.content).length).toBeGreaterThan(20);
    }
  });
});
