/* purpose-built book for lorescan lint: ls812 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['', '  '], scenario: 'Blank.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
