/* purpose-built book for lorescan lint: ls802 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['half-elf', 'elf'], scenario: 'Elves.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
