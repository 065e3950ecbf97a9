/* purpose-built book for lorescan lint: ls813 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['sir.', 'dame!'], scenario: 'Titles.' },
  { tag: 'gull', scenario: 'Gulls wheel overhead.' },
];
